#!/bin/bash
# mcp-gpu listing probe: what a pull would fetch under each root, in ONE pass per root and with no process per
# file: one `find` walks the tree and prints every record, the files to hash go through one `sha256sum -z`
# over a NUL-separated list (big ones through OpenSSL, which uses SHA-NI), and only symlinks cost a fork each.
# Args: MODE LIMIT ROOT...   MODE is "hash" (SHA-256 too) or "newest" (stat only, for staleness checks);
# in hash mode files larger than LIMIT bytes (0 = no limit) are left unhashed ("-") so the pull hashes them.
#
# Output: NUL-separated fields, so no file name can imitate a record (names cannot hold NUL):
#   M i                        root i does not exist
#   R i KIND                   root i is a file (f) or a directory (d)
#   F i REL SIZE MTIME SHA TGT a file (SHA "-" = not hashed here; TGT = symlink target or empty)
#   L i REL TGT                a symlink that resolves outside its root (refused)
#   E i REL WHY                a file that could not be read
#   B i                        then "<sha256>  <REL>" fields from `sha256sum -z` ... until a field "."
set -u
mode=$1 limit=${2:-0}
shift 2
export LC_ALL=C
BIG=$((1 << 20))
tmp=$(mktemp -d 2>/dev/null || { d=/tmp/mcp-gpu-list.$$; mkdir -m 700 "$d" && echo "$d"; }) || exit 3
trap 'rm -rf -- "$tmp"' EXIT
ossl=0
openssl dgst -sha256 -r </dev/null >/dev/null 2>&1 && ossl=1
zsum=0
sha256sum -z </dev/null >/dev/null 2>&1 && zsum=1
hashf() { if [ "$ossl" = 1 ]; then openssl dgst -sha256 -r < "$1"; else sha256sum < "$1"; fi; }
wanted() { [ "$mode" = hash ] && { [ "$limit" = 0 ] || [ "$1" -le "$limit" ]; }; }

i=0
for root in "$@"; do
  if [ ! -e "$root" ]; then printf 'M\0%s\0' "$i"; i=$((i + 1)); continue; fi
  rr=$(readlink -f -- "$root")
  if [ -f "$rr" ]; then
    printf 'R\0%s\0f\0' "$i"
    rel=${root##*/}
    tgt=""
    [ -L "$root" ] && tgt=$(readlink -- "$root")
    st=$(stat -L -c '%s %Y' -- "$rr" 2>/dev/null) || { printf 'E\0%s\0%s\0stat failed\0' "$i" "$rel"; i=$((i + 1)); continue; }
    sha=-
    if wanted "${st% *}"; then
      sha=$(hashf "$rr" 2>/dev/null) || { printf 'E\0%s\0%s\0unreadable\0' "$i" "$rel"; i=$((i + 1)); continue; }
      sha=${sha%% *}
    fi
    printf 'F\0%s\0%s\0%s\0%s\0%s\0%s\0' "$i" "$rel" "${st% *}" "${st#* }" "$sha" "$tgt"
    i=$((i + 1))
    continue
  fi
  printf 'R\0%s\0d\0' "$i"
  : > "$tmp/links"
  : > "$tmp/small"
  : > "$tmp/big"
  # one walk: plain files are printed as records at once; symlinks and the files to hash go to NUL lists
  if [ "$mode" = hash ] && [ "$zsum" = 1 ]; then
    if [ "$limit" = 0 ]; then
      find "$rr" -mindepth 1 \( -type f -printf "F\\000$i\\000%P\\000%s\\000%T@\\000-\\000\\000" \
        \( -size -$((BIG + 1))c -fprintf "$tmp/small" '%P\0' -o -fprintf "$tmp/big" '%P\0' \) \) \
        -o \( -type l -fprintf "$tmp/links" '%P\0' \) 2>/dev/null
    else
      small=$((limit < BIG ? limit : BIG))
      find "$rr" -mindepth 1 \( -type f -printf "F\\000$i\\000%P\\000%s\\000%T@\\000-\\000\\000" \
        \( -size -$((small + 1))c -fprintf "$tmp/small" '%P\0' -o -size -$((limit + 1))c -fprintf "$tmp/big" '%P\0' -o -true \) \) \
        -o \( -type l -fprintf "$tmp/links" '%P\0' \) 2>/dev/null
    fi
  else
    # stat only, or no `sha256sum -z` on this box: list all, hash (if asked) file by file below
    find "$rr" -mindepth 1 \( -type f -printf "F\\000$i\\000%P\\000%s\\000%T@\\000-\\000\\000" -fprintf "$tmp/big" '%P\0' \) \
      -o \( -type l -fprintf "$tmp/links" '%P\0' \) 2>/dev/null
    [ "$mode" = hash ] || : > "$tmp/big"
  fi
  # small files: one sha256sum over the whole list, its NUL-terminated lines passed through unchanged
  if [ -s "$tmp/small" ]; then
    printf 'B\0%s\0' "$i"
    (cd -- "$rr" && xargs -0 -r sha256sum -z -- < "$tmp/small" 2>/dev/null)
    printf '.\0'
  fi
  # big files (and every file without sha256sum -z): OpenSSL where it exists, a fork per file is noise here
  if [ -s "$tmp/big" ]; then
    printf 'B\0%s\0' "$i"
    while IFS= read -r -d '' rel; do
      if [ "$limit" != 0 ]; then
        size=$(stat -c %s -- "$rr/$rel" 2>/dev/null) || continue
        [ "$size" -le "$limit" ] || continue
      fi
      h=$(hashf "$rr/$rel" 2>/dev/null) || continue
      printf '%s  %s\0' "${h%% *}" "$rel"
    done < "$tmp/big"
    printf '.\0'
  fi
  # symlinks: followed only when they stay inside the root
  while IFS= read -r -d '' rel; do
    p=$rr/$rel
    tgt=$(readlink -- "$p")
    real=$(readlink -f -- "$p")
    case $real in
      "$rr"/*) ;;
      *) printf 'L\0%s\0%s\0%s\0' "$i" "$rel" "$tgt"; continue ;;
    esac
    [ -f "$real" ] || continue
    st=$(stat -L -c '%s %Y' -- "$p" 2>/dev/null) || { printf 'E\0%s\0%s\0stat failed\0' "$i" "$rel"; continue; }
    sha=-
    if wanted "${st% *}"; then
      sha=$(hashf "$p" 2>/dev/null) || { printf 'E\0%s\0%s\0unreadable\0' "$i" "$rel"; continue; }
      sha=${sha%% *}
    fi
    printf 'F\0%s\0%s\0%s\0%s\0%s\0%s\0' "$i" "$rel" "${st% *}" "${st#* }" "$sha" "$tgt"
  done < "$tmp/links"
  i=$((i + 1))
done
