"""Services slipstream can start for development and tests (a local Kafka broker)."""
