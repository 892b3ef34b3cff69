"""Source analytics (seed 000 §12, seed 004): chunk utilization, topic coverage, real-user domain analysis,
vector-space projection and chunking comparison. One module per analysis: inputs → (per-item frame, summary)."""
