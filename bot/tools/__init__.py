"""Tools the model may call, and the registry that runs them."""
