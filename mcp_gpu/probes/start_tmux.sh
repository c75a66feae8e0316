# shellcheck shell=bash
# Start a job's wrapper as the command of a tmux session on a dedicated socket (static text).
# Args: SOCKET SESSION RUN_DIR SCRIPT WORKDIR HEARTBEAT_S [SANDBOX-PREFIX...]; stdin: the environment lines (lib/feed.sh).
# Exit 20: no tmux or no setsid; 21: no FIFO; 22: tmux refused; 23: the wrapper never read its environment.
# include: lib/feed.sh
set -u
sock=$1 sess=$2 rd=$3 script=$4 wd=$5 hb=$6
shift 6  # the rest: the sandbox a job on the server's own machine starts in (LaunchSpec.sandbox), or nothing
command -v tmux > /dev/null 2>&1 || { echo "tmux not found on PATH" >&2; exit 20; }
command -v setsid > /dev/null 2>&1 || { echo "setsid not found on PATH" >&2; exit 20; }  # the wrapper needs it
fifo=$rd/.env.fifo
rm -f -- "$fifo"
mkfifo -m 600 -- "$fifo" || exit 21
if ! tmux -L "$sock" new-session -d -s "$sess" -x 200 -y 50 -c "$rd" -- \
  ${1+"$@"} "${BASH:-bash}" "$rd/wrapper.sh" "$rd" "$script" "$wd" "$fifo" "$hb" < /dev/null; then
  rm -f -- "$fifo"
  exit 22
fi
feed_env "$fifo" "$rd"
