#!/usr/bin/env python3
"""Checks the suite's power: each break in tests/breaks.txt is a one-line change to the product
that violates a promise, and the test named beside it must fail on it.

    scripts/breaks.py [--worktree DIR] [NAME ...]   # every break, or those named
    scripts/breaks.py --before COMMIT [NAME ...]    # did the suite of COMMIT miss them?

Each break is applied to a scratch worktree of HEAD (its own target/, kept between runs), the
named test is run there, and the break is undone. A break passes when the build succeeds and the
test fails; a break that does not compile, or that the test survives, is reported. Not part of
CI: each break rebuilds the crate.

With --before, the breaks are applied to an earlier commit and its tests of the same topic (the
file or module the named test lives in) are run: a break that earlier suite survives is one the
new test added power against ("MISSED" there is the expected verdict).
"""

import argparse
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FEATURES = "testing,asyncapi,metrics,cli,libzmq,omq"


def breaks(path):
    """The entries of breaks.txt: blocks of `key: value` lines, separated by blank lines."""
    entries, entry = [], {}
    for line in open(path, encoding="utf-8").read().splitlines() + [""]:
        if line.startswith("#"):
            continue
        if not line.strip():
            if entry:
                missing = {"name", "file", "from", "to", "test"} - entry.keys()
                if missing:
                    sys.exit(f"{path}: the break {entry.get('name')} lacks {sorted(missing)}")
                entries.append(entry)
            entry = {}
            continue
        key, _, value = line.partition(":")
        # `from` and `to` are code: only the one space after the colon is not theirs.
        key = key.strip()
        entry[key] = value[1:] if key in ("from", "to") else value.strip()
    return entries


def run(cmd, cwd, env=None):
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--worktree", default=os.path.join(ROOT, "target", "breaks"))
    parser.add_argument("--before", metavar="COMMIT")
    parser.add_argument("names", nargs="*")
    args = parser.parse_args()

    tree = args.worktree
    if not os.path.isdir(tree):
        subprocess.run(["git", "worktree", "add", "--detach", tree, "HEAD"], cwd=ROOT, check=True)
    head = run(["git", "rev-parse", args.before or "HEAD"], ROOT).stdout.strip()
    subprocess.run(["git", "checkout", "--quiet", "--force", head], cwd=tree, check=True)
    env = dict(os.environ, RUSTSTREAM_ZMQ_PYTHON=os.path.join(ROOT, ".venv", "bin", "python"))

    results = []
    for entry in breaks(os.path.join(ROOT, "tests", "breaks.txt")):
        if args.names and entry["name"] not in args.names:
            continue
        path = os.path.join(tree, entry["file"])
        text = open(path, encoding="utf-8").read()
        if text.count(entry["from"]) != 1:
            results.append((entry["name"], "STALE", f"`{entry['from']}` is not once in {entry['file']}"))
            continue
        open(path, "w", encoding="utf-8").write(text.replace(entry["from"], entry["to"]))
        try:
            target, _, name = entry["test"].partition(" ")
            if args.before:
                # The topic: the test's file (live, interop) or module (lib), not the test.
                parts = [p for p in name.split("::") if p and not p.startswith("on_")]
                name = parts[0] + "::" if parts else name
            selector = {"lib": ["--lib"], "doc": ["--doc"], "zmqs": ["--bin", "zmqs"]}.get(target, ["--test", target])
            cmd = ["cargo", "test", "--features", FEATURES, *selector, name]
            if entry.get("exact") == "yes" and not args.before:
                cmd += ["--", "--exact"]
            out = run(cmd, tree, env)
            log = out.stdout + out.stderr
            if out.returncode == 0 and args.before:
                verdict = ("MISSED", f"the suite of {args.before} passed `{name}` on the break")
            elif out.returncode == 0:
                verdict = ("SURVIVED", "the test passed on the break")
            elif "could not compile" in log:
                verdict = ("NO-BUILD", "the break does not compile")
            elif "0 passed; 0 failed" in log and "FAILED" not in log:
                verdict = ("NO-TEST", "no test matched")
            else:
                failure = next(
                    (l.strip() for l in log.splitlines() if "panicked at" in l or "assertion" in l),
                    "failed",
                )
                following = log.splitlines()
                for i, l in enumerate(following):
                    if "panicked at" in l and i + 1 < len(following):
                        failure = following[i + 1].strip()
                        break
                verdict = ("CAUGHT", failure[:200])
            results.append((entry["name"], *verdict))
        finally:
            open(path, "w", encoding="utf-8").write(text)
        print(f"{results[-1][1]:9} {results[-1][0]}: {results[-1][2]}", flush=True)

    if args.before:
        missed = [r for r in results if r[1] in ("MISSED", "NO-TEST")]
        print(f"{len(missed)} missed by the suite of {args.before}, {len(results) - len(missed)} not")
        sys.exit(0)
    bad = [r for r in results if r[1] != "CAUGHT"]
    print(f"{len(results) - len(bad)} caught, {len(bad)} not")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
