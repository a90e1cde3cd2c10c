"""The model seam: the adapters and the gateway that puts the ledger in front of every call.
The request and response types are ``overnight.messages``; prices, ``overnight.config.prices``."""
