"""minitorch_proto: learning maximally predictive prototypes for multiple instance learning."""
__version__ = "0.1.0"
