"""What the test suites and the benchmarks share: real child processes and servers (mesh_support,
inprocess_mesh, postgres_support, ray_support, prometheus_support, container_support, k8s_support),
test inputs (video_files, parity_set, model_parity_set, media_fuzz, fake_weights, certificates) and
checks (results_schema, metric_names, service_imports, netguard, processes, browser, job_support).
Import them as `from tests.support.video_files import write_video`."""
