//! Fingerprints (being written).
