"""Stand-in GIPE encryptors for oracle fits: the same ciphers as a model already fitted."""

from __future__ import annotations


class Refit:
    """An already fitted encryptor whose ``fit_transform`` returns the ciphers it gives now,
    so that an oracle estimator (``oracle.new_encryptor = lambda: Refit(model.encryptor_)``)
    trains on the very ciphers a saved model was trained on."""

    def __init__(self, fitted):
        self.fitted = fitted

    def fit_transform(self, X, y=None):
        return self.fitted.transform(X)

    def transform(self, X):
        return self.fitted.transform(X)
