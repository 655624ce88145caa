#!/usr/bin/env bash
# rsh-agent.sh — Open MPI's remote shell (plm_rsh_agent) for the emulated cluster: called as
# `rsh-agent.sh HOST COMMAND...` like ssh, it runs COMMAND with /bin/sh inside the node named
# HOST (its network namespace and host name; see cluster.sh), in a clean environment as ssh
# would give it (PATH, HOME, LD_LIBRARY_PATH, TMPDIR of the caller).
set -u
. "$(dirname "$(readlink -f "$0")")/cluster.sh"

if [ $# -lt 2 ]; then
  echo "rsh-agent.sh: usage: rsh-agent.sh HOST COMMAND..." >&2
  exit 255
fi
host=$1
shift
index=${host#node}
if [[ $host != node* || ! $index =~ ^[0-9]+$ ]] || ! ip netns list | grep -q "^$(zt_node_ns "$index")\b"; then
  echo "rsh-agent.sh: '$host' is not a node of the emulated cluster (expected node0, node1, ...; namespaces:" \
    "$(ip netns list | awk '{print $1}' | grep "^${ZT_MN_PREFIX}-" | tr '\n' ' '))" >&2
  exit 255
fi
keep=(PATH="$PATH" HOME="${HOME:-/root}")
[ -n "${LD_LIBRARY_PATH:-}" ] && keep+=(LD_LIBRARY_PATH="$LD_LIBRARY_PATH")
[ -n "${TMPDIR:-}" ] && keep+=(TMPDIR="$TMPDIR")
# ssh joins its arguments with spaces and hands the line to the remote shell: so does this.
zt_node_exec "$index" env -i "${keep[@]}" /bin/sh -c "$*"
