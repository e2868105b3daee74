#!/bin/sh
# concat_scenes.sh LIST_PATH OUT_PATH
#
# The `concat_scenes` tool: ffmpeg's concat demuxer joins the clips the
# concat file lists (stream copy, no re-encode), then ffprobe measures the
# cut and the tool prints it as a Cut JSON record on stdout. Arguments come
# as argv, never through a shell, and are only expanded inside double quotes.
set -eu
[ "$#" -eq 2 ] || { echo "usage: concat_scenes.sh LIST_PATH OUT_PATH" >&2; exit 2; }
list=$1 out=$2
case "$out" in
  *[\"\\]*) echo "concat_scenes: no quotes or backslashes in out_path" >&2; exit 2 ;;
esac
mkdir -p "$(dirname "$out")"
ffmpeg -nostdin -y -loglevel error -f concat -safe 0 -i "$list" -c copy "$out" >&2
duration=$(ffprobe -v error -show_entries format=duration -of default=noprint_wrappers=1:nokey=1 -i "$out")
count=$(grep -c '^file ' "$list")
printf '{"path": "%s", "seconds": %s, "scene_count": %s}\n' "$out" "$duration" "$count"
