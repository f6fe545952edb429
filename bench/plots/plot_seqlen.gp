# bench/plots/plot_seqlen.gp — TFLOP/s against sequence length for the last stages and the
# baselines, one panel per sequence sweep (D, causal, H).
#
# fs_table book writes the data and runs
#   gnuplot -e "datafile='plot_seqlen.dat'; outfile='plot_seqlen.svg';
#               titles='D=64,H=32,non-causal ...'; heading='...';
#               subheading='<GPU>, run <run>'" plot_seqlen.gp
# datafile holds one block per panel (blocks separated by two blank lines): a header line
# `Sq 05_warp_specialized ... sdpa_flash ...`, then one row per sequence length; '-' marks a
# missing value.

# One panel per row, 900 px wide: the book shows the SVG at its own size in its 930 px column, so
# the 12 px text stays 12 px (book/check_browser.py checks at least 11 px as drawn).
npanels = words(titles)
ncols = 1
nrows = npanels
set terminal svg size 900, 380 * nrows + 80 font "sans,12" noenhanced
set output outfile
set datafile missing '-'
set key autotitle columnhead outside right top vertical
set logscale x 2
set xlabel "sequence length S"
set ylabel "TFLOP/s"
set yrange [0 : *]
set grid
set multiplot layout nrows, ncols title heading . "\n" . subheading
do for [k = 1:npanels] {
  stats datafile index (k - 1) using 1 nooutput
  n = STATS_columns
  # Every sequence length labelled: the axis runs a little past the first and the last, so
  # neither label sits on the border (where gnuplot may leave it out).
  set xrange [STATS_min / 1.25 : STATS_max * 1.25]
  set title word(titles, k)
  plot for [i = 2:n] datafile index (k - 1) using 1:i:xtic(1) with linespoints lw 2 pt 7
}
unset multiplot
