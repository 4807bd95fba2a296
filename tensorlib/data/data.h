// tl::data: datasets and the DataLoader (torch.utils.data), and the Fashion-MNIST dataset.
#pragma once

#include "tensorlib/data/dataloader.h"
#include "tensorlib/data/dataset.h"
#include "tensorlib/data/fashion_mnist.h"
