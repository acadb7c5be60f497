"""What the tests share: writers of scan files for every format (``rawfiles``, ``mibfiles``,
``formatfiles``), bad-input cases (``badinput``), example UDFs and their numpy references
(``udf_examples``, ``udf_helpers``), and cluster processes with their UDFs (``clusterprocs``,
``cluster_udfs``). Importable as ``helpers.*``: pytest puts ``tests/`` on ``sys.path``
(``pythonpath`` in pyproject), and cluster workers get it on their ``PYTHONPATH``."""
