#!/bin/sh
# concat_scenes.sh OUT_PATH CLIPS_JSON
#
# The `concat_scenes` tool: joins the scene clips it is given — a JSON list
# of paths, the very clips the audio gate probed — with ffmpeg's concat
# demuxer (stream copy, no re-encode), then ffprobe measures the cut and the
# tool prints it as a Cut JSON record on stdout. No agent names the list of
# what is joined: the control plane passes the probed clips. Arguments come
# as argv, never through a shell, and are only expanded inside double quotes.
set -eu
[ "$#" -eq 2 ] || { echo "usage: concat_scenes.sh OUT_PATH CLIPS_JSON" >&2; exit 2; }
out=$1 clips=$2
case "$out" in
  *[\"\\]*) echo "concat_scenes: no quotes or backslashes in out_path" >&2; exit 2 ;;
esac
mkdir -p "$(dirname "$out")"
# The list and the cut are written beside the target under this process's
# id, and the cut renamed into place: a reader (a probe, a concurrent run of
# the same flow) sees the old cut or the new one, never half of one.
tmp="$(dirname "$out")/.tmp.$$.$(basename "$out")"
list="$tmp.ffconcat"
trap 'rm -f "$tmp" "$list"' EXIT
# ["a.mp4","b.mp4"] -> one path per line (a path may hold no quote, comma,
# backslash, bracket or newline).
paths=$(printf '%s' "$clips" | sed -e 's/^[[:space:]]*\[//' -e 's/\][[:space:]]*$//' | tr ',' '\n' | sed -e 's/^[[:space:]]*"//' -e 's/"[[:space:]]*$//')
count=0
printf 'ffconcat version 1.0\n' > "$list"
for clip in $paths; do
  case "$clip" in
    *[\"\\\'\[\]]*|"") echo "concat_scenes: bad clip path: $clip" >&2; exit 2 ;;
  esac
  [ -f "$clip" ] || { echo "concat_scenes: no clip $clip" >&2; exit 1; }
  case "$clip" in
    /*) abs=$clip ;;
    *) abs="$(pwd)/$clip" ;;
  esac
  printf "file '%s'\n" "$abs" >> "$list"
  count=$((count + 1))
done
[ "$count" -gt 0 ] || { echo "concat_scenes: no clips to join" >&2; exit 1; }
ffmpeg -nostdin -y -loglevel error -f concat -safe 0 -i "$list" -c copy "$tmp" >&2
mv -f "$tmp" "$out"
duration=$(ffprobe -v error -show_entries format=duration -of default=noprint_wrappers=1:nokey=1 -i "$out")
printf '{"path": "%s", "seconds": %s, "scene_count": %s}\n' "$out" "$duration" "$count"
