# shellcheck shell=bash
# Shared tail of the start scripts: feed the wrapper's environment FIFO from our stdin (values never touch the
# disk), then wait for the wrapper's pgid file and print `pgid=...`. Args: FIFO RUN_DIR. Exits 23 when the
# wrapper never read its environment.
feed_env() {
  local fifo=$1 rd=$2 i=0 pg=
  # shellcheck disable=SC2016  # expanded by the inner sh
  if ! timeout 30 sh -c '[ -p "$1" ] && cat > "$1"' mcp-gpu-feed "$fifo"; then
    rm -f -- "$fifo"
    echo "the wrapper did not start (it never read its environment)" >&2
    exit 23
  fi
  rm -f -- "$fifo"
  while [ ! -s "$rd/pgid" ] && [ ! -e "$rd/exit_code" ] && [ "$i" -lt 100 ]; do
    sleep 0.1
    i=$((i + 1))
  done
  [ -f "$rd/pgid" ] && { IFS= read -r pg < "$rd/pgid" || :; }
  printf 'pgid=%s\n' "$pg"
}
