// The service worker's entry (bundled to web/dist/sw.js, served at /sw.js, scope /).
// Each concern is its own module; this file only starts them: the app shell and its
// pinned code (shell.js), and Web Push (push.js).

import { installShell } from './shell.js';
import { installPush } from './push.js';

installShell(self);
installPush(self);
