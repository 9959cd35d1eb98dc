// The service worker's entry (bundled to web/dist/sw.js, served at /sw.js, scope /).
// Each concern is its own module; this file only starts them.

import { installShell } from './shell.js';

installShell(self);
