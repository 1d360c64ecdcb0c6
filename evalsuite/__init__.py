"""evalsuite: did quality regress, where, and is it more than noise?"""

__version__ = "0.1.0"
