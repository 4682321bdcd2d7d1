"""The settings: one `Settings` model, its tiers, and the writer of the settings page."""
