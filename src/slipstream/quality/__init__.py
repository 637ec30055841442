"""Data quality: parsing with rejection reasons, the quarantine, and expectations."""
