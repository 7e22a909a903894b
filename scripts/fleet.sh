#!/usr/bin/env bash
# A fleet on several hosts: Linux network namespaces joined by veth pairs to a bridge, each host
# with its own address, running examples/fleet.rs in its roles. It measures the scale-out with 1,
# 2 and 4 workers, then runs one stream of jobs through four faults: a worker killed with SIGKILL,
# a worker's link cut and restored, the sink restarted, and a worker whose jobs fail and come back
# through its own retry queue. It prints a report and exits non-zero when an expectation fails.
#
#   scripts/fleet.sh [--short] [--backend zeromq|libzmq|omq] [--features LIST] [--bin PATH]
#                    [--dir DIR] [--summary FILE]
#
# --short   about 30 s in all (the test suite runs this); without it, about 100 s
# --backend the socket backend every process of the fleet runs on, one the binary was built with
#            (default: the binary's default, `zeromq` when it has it; `fleet backend` says)
# --features the crate's features to build the fleet with, in place of the defaults (with
#            `--backend libzmq` or `--backend omq` and no `--features`, the defaults and that
#            backend's feature)
# --bin     the fleet binary (default: built with `cargo build --example fleet`)
# --dir     where each process's record (JSON lines) and log go (default: a fresh temp dir)
# --summary where the report's figures go, as JSON
#
# On the libzmq and omq backends every connection speaks CURVE and heartbeats every 500 ms: the
# script makes a certificate for the ventilator, the sink and each worker with pyzmq
# (`zmq.auth.create_certificates`, libzmq's generator; the interpreter in $RUSTSTREAM_ZMQ_PYTHON,
# else .venv/bin/python as scripts/test.sh makes it, else python3), readable by its owner only,
# and gives each process the path of its own host's secret certificate (`--key`) and no other:
# no secret key is in any process's environment. The public keys go in environment variables.
#
# Needs root (namespaces) and iproute2. Every namespace it makes lives under a name with this
# run's pid in it, inside a namespace of its own acting as the switch, so the root namespace's
# links are untouched and two runs never collide; all of it goes on exit, failure or Ctrl-C.
set -euo pipefail
cd "$(dirname "$0")/.."

short=0
backend=""
features=""
bin=""
dir=""
summary=""
while [ $# -gt 0 ]; do
    case "$1" in
        --short) short=1 ;;
        --backend) backend="$2"; shift ;;
        --features) features="$2"; shift ;;
        --bin) bin="$2"; shift ;;
        --dir) dir="$2"; shift ;;
        --summary) summary="$2"; shift ;;
        *) echo "fleet.sh: unknown option $1" >&2; exit 2 ;;
    esac
    shift
done

if [ "$(id -u)" != 0 ]; then
    echo "fleet.sh: needs root to make network namespaces" >&2
    exit 2
fi
if [ -z "$bin" ]; then
    if [ -n "$features" ]; then
        cargo build --quiet --example fleet --no-default-features --features "$features"
    elif [ "$backend" = libzmq ] || [ "$backend" = omq ]; then
        cargo build --quiet --example fleet --features "$backend"
    else
        cargo build --quiet --example fleet
    fi
    bin="${CARGO_TARGET_DIR:-target}/debug/examples/fleet"
fi
bin="$(realpath "$bin")"
[ -n "$dir" ] || dir="$(mktemp -d /tmp/fleet.XXXXXX)"
mkdir -p "$dir"
[ -n "$summary" ] || summary="$dir/summary.json"
# The backend asked for, if the binary has it; else the binary's default.
backend="$("$bin" backend ${backend:+--backend "$backend"})"

# The backends whose fleet speaks CURVE: each process is given its host's certificate.
secured=0
case "$backend" in libzmq | omq) secured=1 ;; esac

if [ "$secured" = 1 ]; then
    python=""
    for candidate in "${RUSTSTREAM_ZMQ_PYTHON:-}" .venv/bin/python python3; do
        if [ -n "$candidate" ] && "$candidate" -c 'import zmq' 2>/dev/null; then
            python="$candidate"
            break
        fi
    done
    if [ -z "$python" ]; then
        echo "fleet.sh: the $backend fleet needs CURVE keys, made with pyzmq: none found" \
            "(\$RUSTSTREAM_ZMQ_PYTHON, .venv/bin/python, python3); scripts/test.sh installs it in .venv" >&2
        exit 2
    fi
    # $keys/<host>.key_secret (mode 600, each host's own) and <host>.key; FLEET_<HOST>_PUBLIC,
    # Z85; FLEET_CLIENTS: the workers' public keys.
    keys="$dir/keys"
    mkdir -p "$keys"
    chmod 700 "$keys"
    clients=""
    while read -r who public; do
        export "FLEET_${who^^}_PUBLIC=$public"
        case "$who" in w*) clients="${clients:+$clients,}$public" ;; esac
    done < <(umask 077; "$python" -c '
import sys, zmq.auth
for who in ["vent", "sink", "w1", "w2", "w3", "w4"]:
    public_file, _ = zmq.auth.create_certificates(sys.argv[1], who)
    public, _ = zmq.auth.load_certificate(public_file)
    print(who, public.decode())
' "$keys")
    export FLEET_CLIENTS="$clients"
    [ -s "$keys/w4.key_secret" ] || { echo "fleet.sh: $python made no keys" >&2; exit 2; }
fi

if [ "$short" = 1 ]; then
    scale_jobs=400      # per scale-out run
    rate=200            # jobs/s in the run with faults
    run_s=20            # its length
    kill_at=4; cut_at=8; cut_for=3; sink_at=13; sink_down=1.5
else
    scale_jobs=2000
    rate=300
    run_s=60
    kill_at=10; cut_at=20; cut_for=10; sink_at=40; sink_down=3
fi

prefix="${FLEET_PREFIX:-rsf}$$"
sw="$prefix-sw"
hosts=(vent w1 w2 w3 w4 sink)
declare -A addr=([vent]=10.77.0.10 [w1]=10.77.0.11 [w2]=10.77.0.12 [w3]=10.77.0.13 [w4]=10.77.0.14 [sink]=10.77.0.20)
declare -A pid=()
made=()

cleanup() {
    local status=$?
    trap - EXIT INT TERM
    for name in "${!pid[@]}"; do
        kill -KILL "${pid[$name]}" 2>/dev/null || true
    done
    for name in "${!pid[@]}"; do
        { wait "${pid[$name]}"; } 2>/dev/null || true
    done
    for ns in "${made[@]}"; do
        ip netns del "$ns" 2>/dev/null || true
    done
    if [ "$status" != 0 ]; then
        echo "fleet.sh: failed ($status); records and logs in $dir" >&2
        for log in "$dir"/*.log; do
            [ -s "$log" ] && { echo "--- $log (last lines)" >&2; tail -n 5 "$log" >&2; }
        done
    fi
    exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

now() { date +%s%3N; }
# Sleeps and runs a command in the background and waits for them, so that a signal to this
# script is acted on at once (bash holds a trap until a foreground command ends).
pause() { sleep "$1" & wait $!; }
in_bg() { "$@" & pid[in_bg]=$!; wait "${pid[in_bg]}"; unset "pid[in_bg]"; }
note() { echo "{\"ev\":\"$1\",\"t\":$(now)${2:+,$2}}" >> "$dir/timeline.jsonl"; }
say() { echo "fleet.sh: $*" >&2; }

# The hosts: one namespace each, a veth pair to the switch's bridge.
ip netns add "$sw"; made+=("$sw")
ip -n "$sw" link set lo up
ip -n "$sw" link add br0 type bridge
ip -n "$sw" link set br0 up
for h in "${hosts[@]}"; do
    ns="$prefix-$h"
    ip netns add "$ns"; made+=("$ns")
    ip -n "$sw" link add "p-$h" type veth peer name eth0 netns "$ns"
    ip -n "$sw" link set "p-$h" master br0 up
    ip -n "$ns" addr add "${addr[$h]}/24" dev eth0
    ip -n "$ns" link set eth0 up
    ip -n "$ns" link set lo up
done
if [ "$secured" = 1 ]; then
    say "backend: $backend, a CURVE certificate for each of the ventilator, the sink and 4 workers, each given only its own secret"
else
    say "backend: $backend"
fi
say "${#hosts[@]} hosts on a bridge: $(for h in "${hosts[@]}"; do printf '%s=%s ' "$h" "${addr[$h]}"; done)"

jobs_at="tcp://${addr[vent]}:5550"
progress_at="tcp://${addr[vent]}:5551"
results_at="tcp://${addr[sink]}:5570"

# start NAME HOST ROLE ARGS...: the process's record goes to NAME.jsonl, its log to NAME.log. On
# libzmq and omq it is given its host's secret certificate, and no other.
start() {
    local name=$1 host=$2; shift 2
    local key=()
    [ "$secured" = 0 ] || key=(--key "$keys/$host.key_secret")
    ip netns exec "$prefix-$host" "$bin" "$@" --backend "$backend" ${key[@]+"${key[@]}"} \
        > "$dir/$name.jsonl" 2> "$dir/$name.log" &
    pid[$name]=$!
}

# Stops NAME with SIGTERM and waits for it; fails if it does not stop within 20 s.
stop() {
    local name=$1
    kill -TERM "${pid[$name]}"
    local waited=0
    while kill -0 "${pid[$name]}" 2>/dev/null; do
        pause 0.05
        waited=$((waited + 1))
        [ "$waited" -lt 400 ] || { say "$name did not stop on SIGTERM"; return 1; }
    done
    wait "${pid[$name]}" || { say "$name exited with $?"; return 1; }
    unset "pid[$name]"
}

# until_true SECONDS WHAT COMMAND...: polls COMMAND until it succeeds, or fails naming WHAT.
until_true() {
    local limit=$1 what=$2; shift 2
    local deadline=$(( $(now) + limit * 1000 ))
    until "$@"; do
        [ "$(now)" -lt "$deadline" ] || { say "not within ${limit} s: $what"; return 1; }
        pause 0.05
    done
}

logged() { grep -q "\"ev\":\"$2\"" "$dir/$1.jsonl" 2>/dev/null; }
# Established connections to PORT on the ventilator's host: its peers.
peers_at() {
    [ "$(ip netns exec "$prefix-vent" ss -Htn state established "( sport = :$1 )" | wc -l)" -ge "$2" ]
}

start_worker() {
    local w=$1; shift
    start "$w" "$w" worker --name "$w" --jobs "$jobs_at" --progress "$progress_at" \
        --results "$results_at" --work-ms 5 "$@"
    until_true 20 "$w started" logged "$w" worker_started
}

# start_vent NAME RUNS JOBS FIRST RATE [options]: a ventilator for one or more runs (RUNS, comma
# separated, each of JOBS jobs); it begins a run once told to (go RUN WORKERS).
start_vent() {
    local name=$1 runs=$2 jobs=$3 first=$4 rate=$5; shift 5
    start "$name" vent vent --jobs-bind "$jobs_at" --progress-bind "$progress_at" \
        --run "$runs" --jobs "$jobs" --first-id "$first" --rate "$rate" --go "$dir/go." "$@"
    until_true 20 "$name bound" logged "$name" vent_bound
}

# go RUN WORKERS: once WORKERS workers are connected to both ventilator sockets, RUN begins.
go() {
    local run=$1 workers=$2
    until_true 30 "$workers worker(s) dialed the jobs queue" peers_at 5550 "$workers"
    until_true 30 "$workers worker(s) dialed the progress fan-out" peers_at 5551 "$workers"
    note go "\"run\":\"$run\""
    touch "$dir/go.$run"
}

start sink1 sink sink --bind "$results_at" --name s1
until_true 20 "the sink started" logged sink1 sink_started

# Scale-out: the same number of jobs, sent as fast as the ventilator can, to 1, 2, 4 workers,
# on one ventilator (the workers of a run have all dialed it before the run begins).
start_vent vent-scale scale1,scale2,scale4 "$scale_jobs" 1 0
workers=0
for n in 1 2 4; do
    while [ "$workers" -lt "$n" ]; do
        workers=$((workers + 1))
        w="w$workers"
        if [ "$w" = w4 ]; then start_worker "$w" --fail-every 5; else start_worker "$w"; fi
    done
    say "scale-out: $scale_jobs jobs to $n worker(s)"
    go "scale$n" "$n"
    in_bg "$bin" await --dir "$dir" --run "scale$n" --collected "$scale_jobs" --timeout 120
done
stop vent-scale

# One stream of jobs through the faults. w4 fails every fifth job of it on the first attempt.
jobs=$((rate * run_s))
say "faults: $jobs jobs at $rate/s over $run_s s"
start_vent vent-faults faults "$jobs" 100001 "$rate" --failures yes
go faults 4
t0=$(now)
at() { local wait_ms=$(( t0 + $1 * 1000 - $(now) )); [ "$wait_ms" -le 0 ] || pause "$(echo "$wait_ms" | awk '{printf "%.3f", $1/1000}')"; }

at "$kill_at"
kill -KILL "${pid[w1]}"
note kill '"worker":"w1"'
{ wait "${pid[w1]}"; } 2>/dev/null || true
unset "pid[w1]"
say "w1 killed"

at "$cut_at"
ip -n "$sw" link set p-w2 down
note cut '"worker":"w2"'
say "w2's link cut"
pause "$cut_for"
ip -n "$sw" link set p-w2 up
note restore '"worker":"w2"'
say "w2's link restored"

at "$sink_at"
note sink_stop
stop sink1
say "sink stopped"
pause "$sink_down"
start sink2 sink sink --bind "$results_at" --name s2
until_true 20 "the sink restarted" logged sink2 sink_started
note sink_start
say "sink restarted"

in_bg "$bin" await --dir "$dir" --run faults --workers w2,w3,w4 --timeout $((run_s + 120))
for name in vent-faults w2 w3 w4 sink2; do stop "$name"; done

echo
echo "fleet: ${#hosts[@]} hosts (namespaces on one bridge), records in $dir"
"$bin" report --backend "$backend" --dir "$dir" --scale scale1:1,scale2:2,scale4:4 \
    --faults faults --live w2,w3,w4 --expect-retries yes --summary "$summary"
