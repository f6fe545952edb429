# bench/plots/plot_seqlen.gp — TFLOP/s against sequence length for the last stages and the
# baselines, one panel per sequence sweep (D, causal, H).
#
# fs_table book writes the data and runs
#   gnuplot -e "datafile='plot_seqlen.dat'; outfile='plot_seqlen.png';
#               titles='D=64,H=32,non-causal ...'; heading='...';
#               subheading='<GPU>, run <run>'" plot_seqlen.gp
# datafile holds one block per panel (blocks separated by two blank lines): a header line
# `Sq 05_warp_specialized ... sdpa_flash ...`, then one row per sequence length; '-' marks a
# missing value.

npanels = words(titles)
ncols = npanels > 1 ? 2 : 1
nrows = (npanels + ncols - 1) / ncols
set terminal pngcairo size 800 * ncols, 420 * nrows + 60 font ",10" noenhanced
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
  stats datafile index (k - 1) using 1 nooutput  # only to count this block's columns
  n = STATS_columns
  set title word(titles, k)
  plot for [i = 2:n] datafile index (k - 1) using 1:i:xtic(1) with linespoints lw 2 pt 7
}
unset multiplot
