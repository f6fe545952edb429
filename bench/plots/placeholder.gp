# bench/plots/placeholder.gp — the image the book shows where a plot has no data yet, drawn by
# gnuplot like every other plot so the doc build needs no other tool.
#
# fs_table book runs it as
#   gnuplot -e "outfile='x.svg'; message='No measurement committed yet.'; detail='...'" placeholder.gp

set terminal svg size 900,300 font "sans,12" noenhanced
set output outfile
unset border
unset tics
unset key
set xrange [0:1]
set yrange [0:1]
set label 1 message at 0.5, 0.6 center font ",16"
set label 2 detail at 0.5, 0.4 center font ",13"
# A curve above the visible range: gnuplot draws the labels and nothing else.
plot 2
