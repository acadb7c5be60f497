"""Pictures of results and live views of runs: `plot` (figures in physical units), `live`
(a figure per 2-D result, redrawn as partitions finish) and `viz` (LiberTEM's live plot
classes).

Views take ltdask's results (xarray) and datasets; they sit above the datasets and UDFs and
below nothing but the command line and the LiberTEM compatibility layer.
"""
