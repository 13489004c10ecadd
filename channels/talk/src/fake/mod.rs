//! A fake Nextcloud Talk server (placeholder; being written).
