#!/bin/sh
# plm_rsh_agent for tools/scaling/netns_hosts.sh: "ssh" to a namespace host, found by
# its address in $NETNS_MAP, running the command there on the host's core.
host="$1"
shift
ns="$(awk -v h="$host" '$1 == h { print $2 }' "$NETNS_MAP")"
cpu="$(awk -v h="$host" '$1 == h { print $3 }' "$NETNS_MAP")"
[ -n "$ns" ] || { echo "netns_agent: no namespace host $host in $NETNS_MAP" >&2; exit 1; }
exec taskset -c "${cpu:-0}" ip netns exec "$ns" /bin/sh -c "$*"
