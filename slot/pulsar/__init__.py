"""The pulsar: the cluster-wide rate limiter (`slotmap pulsar`), its protocol and its client."""
