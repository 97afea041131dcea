"""Layer 4, jobs: folder scans, the job store, the Ray pipeline and its drivers, reference sets, outputs and reports."""
