"""Source analytics (see docs/metrics.md, Analytics): chunk utilization, topic coverage, real-user domain analysis,
vector-space projection and chunking comparison. One module per analysis: inputs → (per-item frame, summary)."""
