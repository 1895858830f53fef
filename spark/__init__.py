"""PySpark jobs over the brokers' exported stats (backlog, throughput and
capacity reports). The stats export and the jobs arrive with the operations
issues; the package exists so the layout is fixed."""
