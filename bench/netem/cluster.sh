#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# cluster.sh — emulated cluster of N "hosts" on one machine, built from
# network namespaces, veth pairs, a bridge and tc token-bucket shaping.
#
#   cluster.sh up [--delay US] N RATE [BURST [LATENCY]]
#                                             e.g.  cluster.sh up 4 1gbit
#                                                   cluster.sh up --delay 500 8 200mbit
#   cluster.sh down                           tear everything down (idempotent)
#   cluster.sh status                         namespaces, addresses, qdisc counters
#   cluster.sh kill                           kill every process still running
#                                             inside the cluster namespaces
#   cluster.sh ns-of IP                       print the namespace that owns IP
#
# Layout (N hosts):
#   namespace cmpibr : bridge br0, ports v0 .. v{N-1}
#   namespace cmpiK  : lo (up), eth0 = 10.77.0.(K+1)/24, veth peer of vK
# Shaping: tbf on eth0 inside cmpiK (host -> network) AND on vK inside cmpibr
# (network -> host), so every host's link is shaped in both directions.
# Defaults: burst 512kb, latency 50ms (override with BURST/LATENCY arguments or
# the CMPI_TBF_BURST / CMPI_TBF_LATENCY environment variables).
# --delay US (or CMPI_DELAY_US): every packet a host sends waits US microseconds before
# its shaper, one way (a round trip: 2 US): netem's job, done by nfq_delay (this kernel has
# no netem qdisc, nor nft's queue expression): an iptables rule in each host's OUTPUT chain
# (-o eth0 -j NFQUEUE --queue-bypass) queues its packets to NFQUEUE 0, which build/nfq_delay
# (one process, pid in /run/cmpi-nfq_delay.pid) releases US later. Needs iptables
# (apt-get install iptables; iptables-legacy is used where present).
#
# Nothing outside the namespaces created here is touched: no address, route,
# sysctl or qdisc of the root namespace is changed.
set -euo pipefail

PREFIX_NS=cmpi           # hosts: cmpi0, cmpi1, ...
BR_NS=cmpibr             # bridge namespace
BR=br0
IFACE=eth0               # name of the veth inside every host namespace
NET=10.77.0              # /24, host K gets $NET.(K+1)
MAX_HOSTS=64
DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
DELAY_PID=/run/cmpi-nfq_delay.pid

die() { echo "cluster.sh: error: $*" >&2; exit 1; }
log() { echo "cluster.sh: $*" >&2; }

need_root() {
    [ "$(id -u)" -eq 0 ] || die "must be run as root (network namespaces and tc need CAP_SYS_ADMIN/CAP_NET_ADMIN); run it with sudo"
    command -v ip >/dev/null || die "'ip' (iproute2) not found"
    command -v tc >/dev/null || die "'tc' (iproute2) not found"
}

# host namespaces that exist now (cmpi<digits>), sorted numerically
host_namespaces() {
    ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^${PREFIX_NS}[0-9]+$" | sort -V || true
}
all_namespaces() {
    host_namespaces
    ip netns list 2>/dev/null | awk '{print $1}' | grep -x "$BR_NS" >/dev/null && echo "$BR_NS" || true
}

kill_all() {
    local ns pids sig
    for sig in TERM KILL; do
        pids=""
        for ns in $(all_namespaces); do
            pids="$pids $(ip netns pids "$ns" 2>/dev/null | tr '\n' ' ')"
        done
        pids=$(echo $pids)
        [ -n "$pids" ] || return 0
        log "sending SIG$sig to processes inside the cluster namespaces: $pids"
        kill -s "$sig" $pids 2>/dev/null || true
        # wait up to 5 s for them to go
        for _ in $(seq 50); do
            local alive=""
            for p in $pids; do [ -d "/proc/$p" ] && alive="$alive $p"; done
            [ -z "$alive" ] && return 0
            sleep 0.1
        done
    done
}

stop_delay() {
    [ -f "$DELAY_PID" ] || return 0
    local pid
    pid=$(cat "$DELAY_PID" 2>/dev/null || true)
    if [ -n "$pid" ] && [ -d "/proc/$pid" ] && grep -q nfq_delay "/proc/$pid/cmdline" 2>/dev/null; then
        kill -TERM "$pid" 2>/dev/null || true
        for _ in $(seq 50); do [ -d "/proc/$pid" ] || break; sleep 0.1; done
    fi
    rm -f "$DELAY_PID" /run/cmpi-delay-us
}

# start_delay US NS...: queue every packet leaving eth0 of each NS to nfq_delay
start_delay() {
    local us=$1; shift
    local ipt
    ipt=$(command -v iptables-legacy || command -v iptables) ||
        die "--delay needs iptables (apt-get install iptables): this kernel has no netem qdisc"
    local bin=$DIR/build/nfq_delay
    if [ ! -x "$bin" ] || [ "$DIR/nfq_delay.c" -nt "$bin" ]; then
        mkdir -p "$DIR/build"
        cc -O2 -Wall -o "$bin" "$DIR/nfq_delay.c" || die "could not build $bin"
    fi
    local ns
    for ns in "$@"; do
        ip netns exec "$ns" "$ipt" -A OUTPUT -o "$IFACE" -j NFQUEUE --queue-num 0 --queue-bypass ||
            die "iptables refused the NFQUEUE rule in $ns"
    done
    setsid "$bin" "$us" "$@" </dev/null >>/run/cmpi-nfq_delay.log 2>&1 &
    echo $! > "$DELAY_PID"
    sleep 0.3
    [ -d "/proc/$(cat "$DELAY_PID")" ] || die "nfq_delay did not start (see /run/cmpi-nfq_delay.log)"
}

cmd_down() {
    need_root "$@"
    stop_delay
    kill_all
    local ns
    for ns in $(all_namespaces); do
        ip netns del "$ns" 2>/dev/null || log "warning: could not delete namespace $ns"
    done
    # stale mount points (e.g. after a crash between 'add' and use)
    for f in /run/netns/${PREFIX_NS}[0-9]* /run/netns/$BR_NS; do
        [ -e "$f" ] || continue
        umount "$f" 2>/dev/null || true
        rm -f "$f" 2>/dev/null || true
    done
    return 0
}

# reachable NS IP: true if IP answers from inside NS.  Uses ping when present,
# otherwise a TCP connect to port 9 (a "connection refused" proves reachability).
reachable() {
    if command -v ping >/dev/null 2>&1; then
        ip netns exec "$1" ping -c1 -W1 -q "$2" >/dev/null 2>&1
        return
    fi
    local out
    out=$(ip netns exec "$1" timeout 2 bash -c "exec 3<>/dev/tcp/$2/9" 2>&1) && return 0
    case $out in *"refused"*) return 0 ;; esac
    return 1
}

shape() {  # shape NS DEV
    tc -n "$1" qdisc replace dev "$2" root tbf rate "$RATE" burst "$BURST" latency "$LATENCY"
}

cmd_up() {
    need_root "$@"
    DELAY_US=${CMPI_DELAY_US:-0}
    if [ "${1:-}" = --delay ]; then DELAY_US=${2:-}; shift 2; fi
    [[ $DELAY_US =~ ^[0-9]+$ ]] || die "--delay needs microseconds (an integer), got '$DELAY_US'"
    [ $# -ge 2 ] || die "usage: $0 up [--delay US] N RATE [BURST [LATENCY]]"
    N=$1; RATE=$2
    BURST=${3:-${CMPI_TBF_BURST:-512kb}}
    LATENCY=${4:-${CMPI_TBF_LATENCY:-50ms}}
    [[ $N =~ ^[0-9]+$ ]] && [ "$N" -ge 1 ] && [ "$N" -le $MAX_HOSTS ] \
        || die "N must be an integer in 1..$MAX_HOSTS (got '$N')"
    [[ $RATE =~ ^[0-9.]+([kmgt]?(bit|bps))$ ]] \
        || die "RATE must be a tc rate like 1gbit, 500mbit, 10gbit (got '$RATE')"

    # Probe: can this kernel / sandbox create network namespaces at all?
    local probe="${PREFIX_NS}probe$$"
    if ! err=$(ip netns add "$probe" 2>&1); then
        die "the kernel refused to create a network namespace ('ip netns add' said: $err). \
The emulated cluster cannot work in this sandbox (needs CAP_SYS_ADMIN + CAP_NET_ADMIN and CONFIG_NET_NS)."
    fi
    if ! err=$(ip -n "$probe" link add vprobe type veth peer name vprobe1 2>&1); then
        ip netns del "$probe" 2>/dev/null || true
        die "the kernel refused to create a veth pair ($err); CONFIG_VETH missing?"
    fi
    ip netns del "$probe"

    # Start from a clean slate (idempotent 'up').
    if [ -n "$(all_namespaces)" ]; then
        log "an old cluster exists; tearing it down first"
        cmd_down
    fi

    trap 'log "setup failed; cleaning up"; cmd_down >/dev/null 2>&1 || true' ERR

    ip netns add "$BR_NS"
    ip -n "$BR_NS" link set lo up
    ip -n "$BR_NS" link add "$BR" type bridge stp_state 0 forward_delay 0
    ip -n "$BR_NS" link set "$BR" up

    local k ns port
    for ((k = 0; k < N; k++)); do
        ns="${PREFIX_NS}$k"; port="v$k"
        ip netns add "$ns"
        ip -n "$ns" link set lo up
        # IPv4 only inside the emulated hosts (no IPv6 DAD/RS chatter on the shaped links)
        ip netns exec "$ns" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 2>/dev/null || true
        # create the pair inside the bridge namespace, move one end into the host
        ip -n "$BR_NS" link add "$port" type veth peer name "$IFACE" netns "$ns"
        ip -n "$BR_NS" link set "$port" master "$BR"
        ip -n "$BR_NS" link set "$port" up
        ip -n "$ns" addr add "$NET.$((k + 1))/24" dev "$IFACE"
        ip -n "$ns" link set "$IFACE" up
        shape "$ns" "$IFACE"         # host -> bridge
        shape "$BR_NS" "$port"       # bridge -> host
    done
    trap - ERR

    # Wait for carrier and check reachability of every host from cmpi0.
    for ((k = 1; k < N; k++)); do
        local ok=0
        for _ in $(seq 30); do
            if reachable "${PREFIX_NS}0" "$NET.$((k + 1))"; then ok=1; break; fi
            sleep 0.2
        done
        [ $ok -eq 1 ] || { cmd_down; die "host $NET.$((k + 1)) not reachable from ${PREFIX_NS}0"; }
    done
    if [ "$DELAY_US" -gt 0 ]; then
        local hosts=()
        for ((k = 0; k < N; k++)); do hosts+=("${PREFIX_NS}$k"); done
        start_delay "$DELAY_US" "${hosts[@]}"
    fi
    echo "$DELAY_US" > /run/cmpi-delay-us
    log "up: $N hosts ${PREFIX_NS}0..${PREFIX_NS}$((N - 1)) = $NET.1..$NET.$N on $IFACE, tbf rate $RATE burst $BURST latency $LATENCY both directions, delay ${DELAY_US} us per packet sent"
}

cmd_status() {
    need_root "$@"
    local hosts
    hosts=$(host_namespaces)
    if [ -z "$hosts" ]; then
        echo "cluster: down"
        ip netns list 2>/dev/null | grep -x "$BR_NS" >/dev/null && echo "(stale bridge namespace $BR_NS present; run '$0 down')"
        return 0
    fi
    echo "cluster: up ($(echo "$hosts" | wc -l) hosts, delay $(cat /run/cmpi-delay-us 2>/dev/null || echo 0) us per packet sent)"
    local ns addr q k pids
    for ns in $hosts; do
        k=${ns#"$PREFIX_NS"}
        addr=$(ip -n "$ns" -4 -o addr show dev "$IFACE" 2>/dev/null | awk '{print $4}')
        q=$(tc -n "$ns" -s qdisc show dev "$IFACE" | awk '/^qdisc tbf/{r=$0; sub(/.*rate /,"",r); sub(/ .*/,"",r)} /Sent/{print r" tx_bytes="$2" drops="$7}' | tr -d ',')
        qi=$(tc -n "$BR_NS" -s qdisc show dev "v$k" 2>/dev/null | awk '/Sent/{print "rx_bytes="$2" drops="$7}' | tr -d ',')
        pids=$(ip netns pids "$ns" | wc -l)
        printf '  %-7s %-14s out: %-40s in: %-30s procs=%s\n' "$ns" "$addr" "$q" "$qi" "$pids"
    done
}

cmd_ns_of() {
    [ $# -eq 1 ] || die "usage: $0 ns-of IP"
    local ip=$1 ns
    if [[ $ip =~ ^10\.77\.0\.([0-9]+)$ ]]; then
        ns="${PREFIX_NS}$((BASH_REMATCH[1] - 1))"
        if ip -n "$ns" -4 -o addr show 2>/dev/null | grep " $ip/" >/dev/null; then echo "$ns"; return 0; fi
    fi
    for ns in $(host_namespaces); do
        if ip -n "$ns" -4 -o addr show 2>/dev/null | grep " $ip/" >/dev/null; then echo "$ns"; return 0; fi
    done
    die "no cluster namespace owns $ip"
}

sub=${1:-}
[ $# -gt 0 ] && shift
case $sub in
    up)     cmd_up "$@" ;;
    down)   cmd_down "$@" ;;
    status) cmd_status "$@" ;;
    kill)   need_root; kill_all ;;
    ns-of)  cmd_ns_of "$@" ;;
    *) echo "usage: $0 up [--delay US] N RATE [BURST [LATENCY]] | down | status | kill | ns-of IP" >&2; exit 2 ;;
esac
