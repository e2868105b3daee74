#!/bin/sh
# render_scene.sh SCENE_ID IMAGE AUDIO SECONDS OUT_PATH
#
# The `render_scene` tool: ffmpeg muxes a still and its narration into one
# scene clip (H.264 + AAC), then ffprobe measures the clip and the tool
# prints it as a SceneClip JSON record on stdout (ffmpeg itself prints
# nothing there). The runtime passes the arguments as argv, never through a
# shell; here they are only ever expanded inside double quotes.
set -eu
[ "$#" -eq 5 ] || { echo "usage: render_scene.sh SCENE_ID IMAGE AUDIO SECONDS OUT_PATH" >&2; exit 2; }
scene_id=$1 image=$2 audio=$3 seconds=$4 out=$5
case "$scene_id$out" in
  *[\"\\]*) echo "render_scene: no quotes or backslashes in scene_id or out_path" >&2; exit 2 ;;
esac
mkdir -p "$(dirname "$out")"
# Written beside the target, then renamed into place: a reader (a probe, a
# concurrent run of the same flow) sees the old clip or the new one, never
# half of one.
tmp="$(dirname "$out")/.tmp.$$.$(basename "$out")"
trap 'rm -f "$tmp"' EXIT
ffmpeg -nostdin -y -loglevel error \
  -loop 1 -t "$seconds" -i "$image" -i "$audio" \
  -c:v libx264 -pix_fmt yuv420p -c:a aac -shortest "$tmp" >&2
mv -f "$tmp" "$out"
duration=$(ffprobe -v error -show_entries format=duration -of default=noprint_wrappers=1:nokey=1 -i "$out")
printf '{"scene_id": "%s", "path": "%s", "seconds": %s}\n' "$scene_id" "$out" "$duration"
