# shellcheck shell=bash
# Args: BATCH_PATH BATCH_TEXT WRAPPER_PATH WRAPPER_TEXT then sbatch's argv. Env and secrets arrive on stdin as
# NUL-terminated NAME=value records, are exported here, and reach the job through `sbatch --export=ALL`.
set -eu
umask 077
put() { mkdir -p -- "$(dirname -- "$1")"; printf '%s' "$2" >"$1.tmp.$$"; chmod 500 "$1.tmp.$$"; mv -f -- "$1.tmp.$$" "$1"; }
put "$1" "$2"
put "$3" "$4"
shift 4
# shellcheck disable=SC2163  # NAME=value records: exporting the record is the point
while IFS= read -r -d '' kv; do export "$kv"; done
exec sbatch "$@"
