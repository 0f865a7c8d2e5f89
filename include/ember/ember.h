// ember/ember.h: the library API of the ember inference engine — load a model (ember/model.h), run many
// sequences together on it (ember/engine.h). Example: examples/batch_generate.cpp; README "Library API".
#pragma once
#include "ember/chat.h"
#include "ember/constraint.h"
#include "ember/engine.h"
#include "ember/model.h"
#include "ember/sampling.h"
#include "ember/status.h"
