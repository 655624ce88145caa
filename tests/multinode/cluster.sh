# shellcheck shell=bash disable=SC2034
# cluster.sh — an emulated cluster on this machine: K "nodes", each a network namespace
# with its own host name, joined by veth pairs to one bridge in the root namespace.
# Sourced by emulated-cluster.sh and rsh-agent.sh; needs root (CAP_NET_ADMIN, CAP_SYS_ADMIN).
#
#   node i        namespace ztmn-node<i>, host name node<i> (a UTS namespace per command),
#                 interface eth0 with 10.77.0.<i+1>/24, /etc/hosts = /etc/netns/ztmn-node<i>/hosts
#   link          ztmn-h<i> (root side, a port of bridge ztmn-br) <-> eth0 (node side)
#   shaping       tbf (--rate) and netem (--delay) as the root qdisc of each node's eth0:
#                 traffic leaving the node goes through it
#
# Invariant: every object this file creates is named with ZT_MN_PREFIX, so zt_cluster_sweep
# removes all of it, whether left by this run or by one that was killed. The bridge carries no
# address: the nodes reach only each other.

ZT_MN_PREFIX=${ZT_MN_PREFIX:-ztmn}
ZT_MN_SUBNET=10.77.0
ZT_MN_BRIDGE=${ZT_MN_PREFIX}-br
ZT_MN_LOCK=/run/${ZT_MN_PREFIX}.lock

zt_node_ns() { echo "${ZT_MN_PREFIX}-node$1"; }
zt_node_name() { echo "node$1"; }
zt_node_addr() { echo "${ZT_MN_SUBNET}.$(($1 + 1))"; }

# Runs "$@" inside node $1: its network namespace, its /etc/hosts, and a UTS namespace whose
# host name is the node's name (Open MPI tells nodes apart by host name).
zt_node_exec() {
  local i=$1
  shift
  ip netns exec "$(zt_node_ns "$i")" unshare --uts -- /bin/sh -c 'hostname "$0" && exec "$@"' \
    "$(zt_node_name "$i")" "$@"
}

# Prints why the cluster cannot be built here (and returns 1), or nothing (returns 0).
zt_cluster_probe() {
  local ns=${ZT_MN_PREFIX}-probe err
  for tool in ip tc unshare flock; do
    command -v "$tool" >/dev/null || { echo "'$tool' is not installed"; return 1; }
  done
  if ! err=$(ip netns add "$ns" 2>&1); then
    echo "cannot create a network namespace (ip netns add: ${err:-failed}); run as root"
    return 1
  fi
  ip netns del "$ns"
  if ! err=$(unshare --uts -- true 2>&1); then
    echo "cannot create a UTS namespace (unshare --uts: ${err:-failed}); run as root"
    return 1
  fi
}

# Whether the kernel has netem (a --delay needs it); prints the reason when it does not.
zt_netem_missing() {
  local dev=${ZT_MN_PREFIX}-probe err rc
  if ! ip link add "$dev" type veth peer name "$dev-p" 2>/dev/null; then
    echo "cannot create a veth pair to test for netem"
    return 0
  fi
  err=$(tc qdisc add dev "$dev" root netem delay 1ms 2>&1)
  rc=$?
  ip link del "$dev"
  [ $rc -eq 0 ] && return 1
  echo "this kernel has no netem qdisc (sch_netem): ${err:-tc failed}"
}

# Removes every object named with the prefix: processes left in the namespaces, the namespaces,
# links, the bridge, the hosts files and run directories (/tmp/<prefix>-run.*). Safe to run when
# nothing exists.
zt_cluster_sweep() {
  local ns pid link
  for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep "^${ZT_MN_PREFIX}-"); do
    for pid in $(ip netns pids "$ns" 2>/dev/null); do
      kill -KILL "$pid" 2>/dev/null
    done
    ip netns del "$ns" 2>/dev/null
  done
  for link in $(ip -o link show 2>/dev/null | awk -F': ' '{print $2}' | sed 's/@.*//' | grep "^${ZT_MN_PREFIX}-"); do
    ip link del "$link" 2>/dev/null
  done
  rm -rf /etc/netns/"${ZT_MN_PREFIX}"-node* /tmp/"${ZT_MN_PREFIX}"-run.*
  rmdir /etc/netns 2>/dev/null
  return 0
}

# zt_cluster_up K [RATE] [DELAY]: builds K nodes; RATE (e.g. 1gbit) and DELAY (e.g. 5ms) shape
# each node's outgoing link when given. Returns non-zero with a message on stderr on failure.
zt_cluster_up() {
  local k=$1 rate=$2 delay=$3 i ns host dev hosts
  ip link add "$ZT_MN_BRIDGE" type bridge || return 1
  ip link set "$ZT_MN_BRIDGE" up || return 1
  hosts="127.0.0.1 localhost"$'\n'
  for ((i = 0; i < k; i++)); do
    hosts+="$(zt_node_addr "$i") $(zt_node_name "$i")"$'\n'
  done
  for ((i = 0; i < k; i++)); do
    ns=$(zt_node_ns "$i") host=${ZT_MN_PREFIX}-h$i dev=${ZT_MN_PREFIX}-n$i
    mkdir -p "/etc/netns/$ns" && printf '%s' "$hosts" >"/etc/netns/$ns/hosts" || return 1
    ip netns add "$ns" || return 1
    ip link add "$host" type veth peer name "$dev" || return 1
    ip link set "$dev" netns "$ns" || return 1
    ip -n "$ns" link set "$dev" name eth0 || return 1
    ip link set "$host" master "$ZT_MN_BRIDGE" || return 1
    ip link set "$host" up || return 1
    ip -n "$ns" addr add "$(zt_node_addr "$i")/24" dev eth0 || return 1
    ip -n "$ns" link set lo up || return 1
    ip -n "$ns" link set eth0 up || return 1
    zt_shape_node "$i" "$rate" "$delay" || return 1
  done
  zt_wait_reachable "$k"
}

# Shapes what leaves node $1: tbf for a rate, netem for a delay, netem with a rate for both.
zt_shape_node() {
  local ns rate=$2 delay=$3
  ns=$(zt_node_ns "$1")
  if [ -n "$delay" ]; then
    ip netns exec "$ns" tc qdisc add dev eth0 root netem delay "$delay" ${rate:+rate "$rate"}
  elif [ -n "$rate" ]; then
    # burst 32 KiB: a few full frames may go at line rate; latency: how long a packet may queue.
    ip netns exec "$ns" tc qdisc add dev eth0 root tbf rate "$rate" burst 32kb latency 400ms
  fi
}

# Every node reaches every other one by name: a TCP connection to a closed port is refused
# (bash prints "Connection refused") only when the peer answered; no answer in 5 s is a failure.
zt_wait_reachable() {
  local k=$1 i j out
  for ((i = 0; i < k; i++)); do
    for ((j = 0; j < k; j++)); do
      [ "$i" -eq "$j" ] && continue
      out=$(ip netns exec "$(zt_node_ns "$i")" timeout 5 bash -c "exec 3<>/dev/tcp/$(zt_node_name "$j")/9" 2>&1)
      if [[ $out != *"Connection refused"* ]]; then
        echo "node$i cannot reach node$j ($(zt_node_addr "$j")) over the bridge" >&2
        return 1
      fi
    done
  done
}

# Bytes node $1 has sent on its eth0 (the namespace's own counter).
zt_node_tx_bytes() {
  ip netns exec "$(zt_node_ns "$1")" cat /sys/class/net/eth0/statistics/tx_bytes
}
