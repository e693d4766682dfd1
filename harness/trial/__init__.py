"""The trial pipeline: stages, owned resources, and the receipt they leave."""
