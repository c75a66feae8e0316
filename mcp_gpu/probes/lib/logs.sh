# shellcheck shell=bash
# Read new log bytes for many jobs and print `jN.log_new=FROM BASE64` then `jN.end=1` records (lib/frame.sh).
# Args: quadruples IDX PATH FROM COUNT. Each read is bounded by COUNT (the caller's per-job cap). One python3
# process reads them all where python3 exists (no fork per job); otherwise one tail|head|base64 pipe per job.
# A path that is not a regular file (a FIFO, a device) is never opened for reading.
read_logs() {
  [ "$#" -gt 0 ] || return 0
  if command -v python3 > /dev/null 2>&1; then
    printf '%s\0' "$@" | python3 -c '
import base64, os, stat, sys
f = sys.stdin.buffer.read().split(b"\0")[:-1]
out = sys.stdout.buffer
for k in range(0, len(f) - 3, 4):
    idx, path, start, count = f[k].decode(), f[k + 1], int(f[k + 2]), int(f[k + 3])
    data = b""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY)
        try:
            if stat.S_ISREG(os.fstat(fd).st_mode):
                os.lseek(fd, start, 0)
                while len(data) < count:
                    chunk = os.read(fd, min(1 << 20, count - len(data)))
                    if not chunk:
                        break
                    data += chunk
        finally:
            os.close(fd)
    except OSError:
        pass
    out.write(b"j%s.log_new=%d %s\0j%s.end=1\0" % (idx.encode(), start, base64.b64encode(data), idx.encode()))
out.flush()
'
    return 0
  fi
  local b
  while [ "$#" -ge 4 ]; do
    b=
    [ -f "$2" ] && b=$(tail -c +"$(($3 + 1))" -- "$2" 2> /dev/null | head -c "$4" | base64 -w0)
    rec "j$1.log_new" "$3 $b"
    rec "j$1.end" 1
    shift 4
  done
}
