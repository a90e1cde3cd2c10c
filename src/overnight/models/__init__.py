"""The model seam: request and response types, the adapters, prices, and the gateway that
puts the ledger in front of every call."""
