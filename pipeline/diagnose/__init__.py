"""Why a job is slow or broken, measured outside the timed loop: graph breaks with their lines
(`compile_log`), torch's compile records (`compile_stats`), `explain`, host-device `syncs`, the
`profiler`, FLOPs and MFU (`flops`)."""
