# shellcheck shell=bash
# Output framing of the probes: records `KEY=VALUE` each ended by a NUL byte. KEY is always ours; VALUE is a
# shell variable or a path, and neither can hold a NUL (bash drops them, the kernel forbids them in names), so
# no remote content (a file name, a log line, nvidia-smi or Slurm text) can end a record or start another.
# Binary data (log bytes) travels base64-encoded.
rec() { printf '%s=%s\0' "$1" "$2"; }

# Set the variable named $1 to the path $2 with a leading `~` or `~/` as the remote user's home (no fork).
# shellcheck disable=SC2088  # the tilde is matched literally on purpose
expand_home() {
  local -n _to=$1
  case $2 in
    "~") _to=$HOME ;;
    "~/"*) _to="$HOME/${2#"~/"}" ;;
    *) _to=$2 ;;
  esac
}

# Read at most 128 characters of the first line of a small regular file into the variable named $2 (never a
# FIFO or a device: `-f` is false for both, so a planted FIFO cannot hang the probe).
read_small() {
  local -n _out=$2
  _out=
  [ -f "$1" ] || return 1
  { IFS= read -r -n 128 _out || :; } 2> /dev/null < "$1"
  return 0
}
