"""Peer comparisons: ours beside the library a user would otherwise reach for (``make bench``)."""
