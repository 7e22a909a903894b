//! The framework's conformance suites (`ruststream::conformance`), in process and live over
//! loopback, for every pattern and both sides where a suite takes them.

#[cfg(feature = "asyncapi")]
mod credentials;
#[cfg(feature = "asyncapi")]
mod document;
mod in_process;
mod live;
mod test_app;
