# bench/plots/plot_stages.gp — TFLOP/s of every stage and baseline, one panel per sequence
# sweep (D, causal, H), bars clustered by backend with one bar per sequence length. The y axis
# is logarithmic: the first and the last stages differ by orders of magnitude.
#
# fs_table book writes the data and runs
#   gnuplot -e "datafile='plot_stages.dat'; outfile='plot_stages.svg';
#               titles='D=64,H=32,non-causal D=64,H=32,causal ...'; heading='...';
#               subheading='<GPU>, run <run>'" plot_stages.gp
# datafile holds one block per panel (blocks separated by two blank lines): a header line
# `backend "S=512" "S=1024" ...`, then one row per backend; '-' marks a missing value.

# One panel per row, 900 px wide: the book shows the SVG at its own size in its 930 px column, so
# the 12 px text stays 12 px (book/check_browser.py checks at least 11 px as drawn).
npanels = words(titles)
ncols = 1
nrows = npanels
set terminal svg size 900, 420 * nrows + 80 font "sans,12" noenhanced
set output outfile
set datafile missing '-'
set key autotitle columnhead outside bottom center horizontal
set style data histograms
set style histogram cluster gap 1
set style fill solid 0.85 border -1
set logscale y
set ylabel "TFLOP/s (log scale)"
set grid ytics
set xtics rotate by -35 scale 0
set multiplot layout nrows, ncols title heading . "\n" . subheading
do for [k = 1:npanels] {
  # Count this block's columns, then find its smallest value to start the log axis under it.
  stats datafile index (k - 1) using 2 nooutput
  n = STATS_columns
  lo = STATS_min
  do for [i = 3:n] {
    stats datafile index (k - 1) using i nooutput
    lo = STATS_min < lo ? STATS_min : lo
  }
  set yrange [10 ** floor(log10(lo / 2)) : *]
  set title word(titles, k)
  plot for [i = 2:n] datafile index (k - 1) using i:xtic(1)
}
unset multiplot
