import numpy as np
from cdmetadl.ingestion.data_generator import Task


class Predictor():
    def __init__(self) -> None:
        pass

    def predict(self, query_set):
        raise NotImplementedError


class Learner():
    def __init__(self) -> None:
        pass

    def fit(self, support_set):
        raise NotImplementedError

    def save(self, path_to_save: str) -> None:
        raise NotImplementedError

    def load(self, path_to_load: str) -> None:
        raise NotImplementedError


class MetaLearner():
    def __init__(self, train_classes, total_classes, logger) -> None:
        self.train_classes = train_classes
        self.total_classes = total_classes
        self.log = logger.log

    def meta_fit(self, meta_train_generator, meta_valid_generator):
        raise NotImplementedError
