"""A NeurIPS'22 submission, unchanged, runs on the platform: it imports `api` from its own copy
and builds torchvision's ResNet-18, which only the `metadl-arena/sandbox:torchvision` image
holds (the image `examples/neurips22` phases name). Uploaded over HTTP, run by a Celery worker
in the Docker sandbox, scored. Kept small: two meta-train tasks, two test tasks per dataset,
the tiny generated collection."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from arena_test_services import require_service
from platform_support import Platform

from submission_api.submission_zip import build_submission_zip

pytestmark = [pytest.mark.integration, pytest.mark.docker, pytest.mark.slow]

IMAGE = "metadl-arena/sandbox:torchvision"

# The starting kit's api.py of 2022, as participants copied it next to their model.py.
API = '''
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
'''

# A prototypical network on torchvision's ResNet-18, written as the 2022 baselines were.
MODEL = '''
import os
import random

import numpy as np
import torch
import torch.nn.functional as F
from torchvision.models import resnet18

from api import MetaLearner, Learner, Predictor

random.seed(98)
np.random.seed(98)
torch.manual_seed(98)


def backbone():
    net = resnet18(weights=None, num_classes=64)
    return net


def prototypes(net, x, y, n_ways):
    embeddings = net(x)
    return torch.stack([embeddings[y == c].mean(0) for c in range(n_ways)])


class MyMetaLearner(MetaLearner):
    def __init__(self, train_classes, total_classes, logger):
        super().__init__(train_classes, total_classes, logger)
        self.net = backbone()

    def meta_fit(self, meta_train_generator, meta_valid_generator):
        optimizer = torch.optim.Adam(self.net.parameters(), lr=1e-3)
        self.net.train()
        for task in meta_train_generator(2):
            x_s, y_s, _ = task.support_set
            x_q, y_q, _ = task.query_set
            protos = prototypes(self.net, x_s, y_s, task.num_ways)
            loss = F.cross_entropy(-torch.cdist(self.net(x_q), protos), y_q)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        return MyLearner(self.net.state_dict())


class MyLearner(Learner):
    def __init__(self, state=None):
        super().__init__()
        self.net = backbone()
        if state is not None:
            self.net.load_state_dict(state)

    def fit(self, support_set):
        x, y, _, n_ways, _ = support_set
        self.net.eval()
        with torch.no_grad():
            return MyPredictor(self.net, prototypes(self.net, x, y, n_ways))

    def save(self, path_to_save):
        torch.save(self.net.state_dict(), os.path.join(path_to_save, "learner.pt"))

    def load(self, path_to_load):
        self.net.load_state_dict(torch.load(os.path.join(path_to_load, "learner.pt")))


class MyPredictor(Predictor):
    def __init__(self, net, protos):
        super().__init__()
        self.net, self.protos = net, protos

    def predict(self, query_set):
        with torch.no_grad():
            return F.softmax(-torch.cdist(self.net(query_set), self.protos), dim=1).numpy()
'''

CONFIG = '{"train_data_format": "task", "train_config": {"N": 3, "k": 1, ' \
         '"query_images_per_class": 2}}'


def neurips22_zip(folder: Path) -> Path:
    folder.mkdir(parents=True)
    for name, text in (("api.py", API), ("model.py", MODEL), ("config.json", CONFIG)):
        (folder / name).write_text(textwrap.dedent(text).lstrip())
    return build_submission_zip(folder, folder.with_suffix(".zip"))


def test_an_unchanged_neurips22_resnet18_zip_is_scored_in_the_torchvision_sandbox(
        platform: Platform, tiny_collection: Path, arena_cache: Path, tmp_path: Path) -> None:
    try:
        import docker

        docker.from_env().images.get(IMAGE)
    except Exception as error:  # noqa: BLE001 - any failure means no image
        require_service(f"Docker image {IMAGE}",
                        f"{error}; bash scripts/build_sandbox_image.sh torchvision")
    organizer = platform.create_user("tv-organizer", "organizer")
    data = platform.register_collection(tiny_collection, arena_cache)
    phase_id = platform.create_phase(
        organizer, data, image=IMAGE, time_limit_s=900,
        protocol={"name": "cross-domain", "tasks_per_dataset": 2},
        resources={"cpus": 2, "memory_mb": 6144, "gpus": 0})
    platform.start_worker("tv", ARENA_WORKER_MAX_TIME_LIMIT_S="900")
    participant = platform.create_user("tv-participant")

    submission_id = platform.submit(participant, phase_id, neurips22_zip(tmp_path / "resnet"))
    final = platform.wait_terminal(participant, submission_id, timeout_s=1200)

    assert final["state"] == "finished", final
    assert final["score"] is not None and -1.0 <= final["score"] <= 1.0, final
