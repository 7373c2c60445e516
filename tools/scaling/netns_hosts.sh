# Test hosts for communication over shaped links: Linux network namespaces,
# one per rank, each joined to a bridge (in a namespace of its own) by a veth
# pair shaped with tc tbf in both directions, so every rank has a full-duplex
# "NIC" of the given rate. mpirun runs in the first host and reaches the
# others over TCP through plm_rsh_agent = tools/scaling/netns_agent.sh. Traffic goes
# only to these addresses and to loopback. Root only; sourced by
# tools/scaling/scaling_validation and the tests.
#
#   source tools/scaling/netns_hosts.sh
#   netns_up 2 1gbit      # 2 hosts at 1 Gbit/s each way; sets NETNS_MPIRUN
#   $NETNS_MPIRUN -np 2 prog ...
#   netns_down            # also on EXIT, via the caller's trap

NETNS_TAG=""
NETNS_NAMES=()
NETNS_MPIRUN=""

# Whether this machine can make them (root, ip, tc, tbf): prints why not.
netns_available() {
  [ "$(id -u)" = 0 ] || { echo "not root"; return 1; }
  command -v ip > /dev/null && command -v tc > /dev/null || { echo "no ip or tc (iproute2)"; return 1; }
  local probe="ddpprobe$$"
  ip netns add "$probe" 2> /dev/null || { echo "cannot create network namespaces"; return 1; }
  ip -n "$probe" link add va type veth peer name vb 2> /dev/null &&
    ip netns exec "$probe" tc qdisc add dev va root tbf rate 1gbit burst 256kb latency 20ms 2> /dev/null
  local ok=$?
  ip netns del "$probe"
  [ "$ok" = 0 ] || { echo "no tc tbf"; return 1; }
}

# Namespaces left by runs that were killed: named ddpt<pid>_*, pid dead.
netns_remove_stale() {
  local ns pid
  for ns in $(ip netns list 2> /dev/null | awk '{print $1}' | grep '^ddpt[0-9]*_'); do
    pid="${ns#ddpt}"
    pid="${pid%%_*}"
    kill -0 "$pid" 2> /dev/null || ip netns del "$ns" 2> /dev/null
  done
}

# netns_up HOSTS RATE [BURST]: RATE as tc takes it (1gbit, 500mbit).
netns_up() {
  local hosts="$1" rate="$2" burst="${3:-512kb}" here
  here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
  netns_remove_stale
  NETNS_TAG="ddpt$$_${RANDOM}"
  # A /24 of 10.252-254.x.0 no interface here already has.
  local net="" try
  for try in $(seq 1 50); do
    try="10.$((252 + RANDOM % 3)).$((RANDOM % 250 + 1))"
    grep -q " $try\." <<< "$(ip -o addr 2> /dev/null)" && continue
    net="$try"
    break
  done
  [ -n "$net" ] || { echo "netns_up: no free subnet" >&2; return 1; }
  local br="${NETNS_TAG}_br" i ns cpus=() range
  # The cores this process may use (a cpuset need not start at 0).
  for range in $(awk '/^Cpus_allowed_list/ { gsub(",", " ", $2); print $2 }' /proc/self/status); do
    cpus+=($(seq "${range%-*}" "${range#*-}"))
  done
  [ "${#cpus[@]}" -gt 0 ] || cpus=(0)
  ip netns add "$br" && NETNS_NAMES+=("$br") || return 1
  ip -n "$br" link set lo up && ip -n "$br" link add br0 type bridge && ip -n "$br" link set br0 up || return 1
  NETNS_MAP="$(mktemp)"
  NETNS_HOSTFILE="$(mktemp)"
  for i in $(seq 1 "$hosts"); do
    ns="${NETNS_TAG}_$i"
    ip netns add "$ns" && NETNS_NAMES+=("$ns") || return 1
    ip link add eth0 netns "$ns" type veth peer name "p$i" netns "$br" || return 1
    ip -n "$ns" addr add "$net.$i/24" dev eth0 &&
      ip -n "$ns" link set eth0 up && ip -n "$ns" link set lo up &&
      ip -n "$br" link set "p$i" master br0 && ip -n "$br" link set "p$i" up || return 1
    # Each way: what the host sends (its eth0), what it receives (p$i).
    ip netns exec "$ns" tc qdisc add dev eth0 root tbf rate "$rate" burst "$burst" latency 20ms &&
      ip netns exec "$br" tc qdisc add dev "p$i" root tbf rate "$rate" burst "$burst" latency 20ms || return 1
    # CUBIC on the hosts' own subnet: this kernel's default, BBR, settles
    # at about half of a tbf-shaped rate when both directions are busy (a
    # route attribute, since the namespace's sysctl may be read-only).
    ip -n "$ns" route replace "$net.0/24" dev eth0 proto kernel scope link src "$net.$i" congctl cubic ||
      return 1
    # Each host's processes on a core of their own, as a host of its own
    # would have (hosts beyond the cores share them in turn): left to the
    # scheduler, a rank's polling thread and the kernel's network work
    # land beside another rank's compute and slow it by up to a quarter.
    echo "$net.$i $ns ${cpus[$(( (i - 1) % ${#cpus[@]} ))]}" >> "$NETNS_MAP"
    echo "$net.$i slots=1" >> "$NETNS_HOSTFILE"
  done
  export NETNS_MAP
  NETNS_FIRST="${NETNS_TAG}_1"
  # Open MPI's TCP transport over the shaped links only: four sockets per
  # peer (as NCCL's socket transport opens several) with 8 MiB buffers; with
  # one socket, or the default buffers, a shaped link busy both ways often
  # runs at half its rate.
  NETNS_MPIRUN="taskset -c ${cpus[0]} ip netns exec $NETNS_FIRST timeout ${NETNS_TIMEOUT:-600} mpirun --allow-run-as-root --hostfile $NETNS_HOSTFILE \
    --mca plm_rsh_agent $here/netns_agent.sh --mca plm_rsh_no_tree_spawn 1 --mca btl tcp,self \
    --mca btl_tcp_if_include $net.0/24 --mca oob_tcp_if_include $net.0/24 --mca btl_tcp_links 4 \
    --mca btl_tcp_sndbuf 8388608 --mca btl_tcp_rcvbuf 8388608 --bind-to none \
    -x NETNS_MAP -x PATH -x LD_LIBRARY_PATH"
}

netns_down() {
  local ns
  for ns in "${NETNS_NAMES[@]}"; do ip netns pids "$ns" 2> /dev/null | xargs -r kill -9 2> /dev/null; done
  for ns in "${NETNS_NAMES[@]}"; do ip netns del "$ns" 2> /dev/null; done
  NETNS_NAMES=()
  rm -f "${NETNS_MAP:-}" "${NETNS_HOSTFILE:-}"
}
