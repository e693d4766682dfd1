"""Code that ships into the guest VM. Imports receipts and pinned wheels only."""
