# bench/plots/schedule_gantt.gp — stage 08b's static and dynamic walks of its causal order as a
# Gantt chart: one row per persistent block, one bar per work item, coloured by its query block i
# (dark: the heaviest, i = Tr - 1, first in the order), time in key tiles.
#
# book/generate.cmake runs, after fs_schedule_sim --out <gen> (bench/schedule-sim.cpp):
#   gnuplot -e "datafile='schedule_gantt.dat'; outfile='schedule_gantt.svg'" schedule_gantt.gp
# datafile: two blocks (static, then dynamic) separated by two blank lines, one row per item:
# block start end i section.

set terminal svg size 900, 760 font "sans,12" noenhanced
set output outfile
stats datafile index 0 using 1 nooutput
nblocks = STATS_max + 1
stats datafile index 0 using 3 nooutput
tmax = STATS_max
stats datafile index 0 using 4 nooutput
imax = STATS_max
set xrange [0 : tmax * 1.02]
set yrange [-1 : nblocks]
set ylabel "persistent block"
set ytics 0, 22
set grid x
set palette defined (0 "#fde725", 0.5 "#21918c", 1 "#440154")
set cbrange [0 : imax]
set cblabel "query block i"
unset key
set multiplot layout 2, 1 title "Stage 08b, causal, D = 128, S = 16k: each block's work items under the two walks of the LPT order (simulated, in key tiles)"
set title "static: block b takes items b, b + G, b + 2G, ..."
plot datafile index 0 using (($2 + $3) / 2):1:(($3 - $2) / 2):(0.45):4 with boxxyerror fs solid 1.0 noborder lc palette
set title "dynamic: the next item goes to the block that asks first"
set xlabel "time (key tiles of one work item)"
plot datafile index 1 using (($2 + $3) / 2):1:(($3 - $2) / 2):(0.45):4 with boxxyerror fs solid 1.0 noborder lc palette
unset multiplot
