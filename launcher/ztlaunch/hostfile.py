"""Hostfiles (DeepSpeed format) and the slot selection made by --include/--exclude/--num-nodes/--num-gpus.

A pool is an ordered list of (host, slot_count). A selection is an ordered list of (host, [slot
indices]) with every host's indices sorted, unique and < its slot count; hosts keep pool order,
which is also MPI rank order (ranks fill the first host, then the next).
"""
import re

from .errors import MAX_SLOTS_PER_HOST, LaunchError, read_text_file

_HOST_LINE = re.compile(r"^(\S+)\s+slots=(\S+)$")


def parse_hostfile_text(text, name):
    """Parses 'host slots=N' lines ('#' starts a comment, blank lines allowed) into a pool.

    Raises LaunchError naming name:line for anything else, duplicate hosts or an empty file.
    """
    pool = []
    seen = {}
    for lineno, raw in enumerate(text.splitlines(), start=1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        where = "%s:%d" % (name, lineno)
        m = _HOST_LINE.match(line)
        if not m:
            raise LaunchError("%s: '%s': expected 'HOSTNAME slots=N' (one host per line, '#' for comments)"
                              % (where, raw.strip()))
        host, slots_text = m.group(1), m.group(2)
        if (not re.fullmatch(r"[0-9]{1,9}", slots_text) or int(slots_text) < 1
                or int(slots_text) > MAX_SLOTS_PER_HOST):
            raise LaunchError("%s: slots=%s for host '%s': expected a whole number from 1 to %d"
                              % (where, slots_text, host, MAX_SLOTS_PER_HOST))
        if "@" in host or ":" in host or "," in host:
            raise LaunchError("%s: host name '%s' may not contain '@', ':' or ','" % (where, host))
        if host in seen:
            raise LaunchError("%s: host '%s' is listed twice (first at line %d)" % (where, host, seen[host]))
        seen[host] = lineno
        pool.append((host, int(slots_text)))
    if not pool:
        raise LaunchError("%s: no hosts; expected lines like 'worker-1 slots=4'" % name)
    return pool


def parse_hostfile(path):
    return parse_hostfile_text(read_text_file(path, "--hostfile"), path)


def _parse_filter(spec, flag, pool):
    """Parses 'host1@host2:0,2' into an ordered dict host -> None (all slots) or [indices]."""
    slots_of = dict(pool)
    out = {}
    if not spec.strip():
        raise LaunchError("%s '': expected HOST[:SLOT,...][@HOST[:SLOT,...]...]" % flag)
    for part in spec.split("@"):
        host, sep, slot_text = part.partition(":")
        if not host:
            raise LaunchError("%s '%s': empty host name in '%s'" % (flag, spec, part))
        if host not in slots_of:
            raise LaunchError("%s '%s': unknown host '%s'; the hosts are: %s"
                              % (flag, spec, host, ", ".join(h for h, _ in pool)))
        if host in out:
            raise LaunchError("%s '%s': host '%s' is named twice" % (flag, spec, host))
        if not sep:
            out[host] = None
            continue
        indices = []
        for tok in slot_text.split(","):
            if not re.fullmatch(r"[0-9]+", tok):
                raise LaunchError("%s '%s': slot '%s' on host '%s': expected a slot index (0, 1, ...)"
                                  % (flag, spec, tok, host))
            idx = int(tok)
            if idx >= slots_of[host]:
                raise LaunchError("%s '%s': host '%s' has slots 0..%d, not %d"
                                  % (flag, spec, host, slots_of[host] - 1, idx))
            if idx in indices:
                raise LaunchError("%s '%s': slot %d on host '%s' is named twice" % (flag, spec, idx, host))
            indices.append(idx)
        out[host] = sorted(indices)
    return out


def select_slots(pool, include="", exclude="", num_nodes=None, num_gpus=None):
    """Applies DeepSpeed's selection rules to pool and returns the selection.

    include keeps only the named hosts/slots; exclude removes them (a bare host removes the whole
    host); then num_nodes keeps the first N hosts and num_gpus the first K selected slots of each.
    """
    if include and exclude:
        raise LaunchError("--include and --exclude together: use one of them")
    if include:
        chosen = _parse_filter(include, "--include", pool)
        selection = [(h, chosen[h] if chosen[h] is not None else list(range(n))) for h, n in pool if h in chosen]
    else:
        removed = _parse_filter(exclude, "--exclude", pool) if exclude else {}
        selection = []
        for h, n in pool:
            drop = removed.get(h, [])
            if drop is None:
                continue
            left = [i for i in range(n) if i not in drop]
            if left:
                selection.append((h, left))
    if not selection:
        raise LaunchError("--exclude '%s' leaves no slots to run on" % exclude)
    if num_nodes is not None:
        if num_nodes < 1 or num_nodes > len(selection):
            raise LaunchError("--num-nodes %d: expected 1..%d (the hosts left after selection)"
                              % (num_nodes, len(selection)))
        selection = selection[:num_nodes]
    if num_gpus is not None:
        fewest = min(len(s) for _, s in selection)
        if num_gpus < 1 or num_gpus > fewest:
            raise LaunchError("--num-gpus %d: expected 1..%d (the slots every selected host has)" % (num_gpus, fewest))
        selection = [(h, s[:num_gpus]) for h, s in selection]
    return selection
