#!/usr/bin/env bash
# One GPU lock directory per host, shared by every revert-bisect runner on it (runners/gpulocks.py).
#
# Run once per GPU machine, on the host itself (not inside a container), before starting its runners:
#
#   sudo deploy/gpu-locks.sh                       # /var/lib/revert-bisect/gpu-locks, owned by uid 10001
#   sudo RUNNER_UID=1001 deploy/gpu-locks.sh DIR   # another directory, or runners of another uid
#
# then mount it into every runner container at the same path: -v DIR:DIR (the runner image sets
# REVERT_BISECT_GPU_LOCKS=/var/lib/revert-bisect/gpu-locks). It writes the marker a step checks before it takes
# GPUs: `.revert-bisect-gpu-locks`, naming the directory's own device and inode. A step sees that device and
# inode only through the host's directory itself, never in a copy or a directory a container made for itself.
# Running it again is harmless; a directory made anew (another inode) needs it again.
set -euo pipefail

dir="${1:-/var/lib/revert-bisect/gpu-locks}"
uid="${RUNNER_UID:-10001}"

install -d -m 0775 -o "$uid" -g "$uid" "$dir"
marker="$dir/.revert-bisect-gpu-locks"
next="$(mktemp "$dir/.revert-bisect-gpu-locks.XXXXXX")"
printf 'device=%s inode=%s\n' "$(stat -c %d "$dir")" "$(stat -c %i "$dir")" >"$next"
chmod 0444 "$next"
mv -f "$next" "$marker"
echo "$dir: the GPU lock directory of this host; mount it into every runner container: -v $dir:$dir"
